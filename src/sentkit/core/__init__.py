"""What every room shares, light and importing only each other (no torch at import): the one error
contract (`errors`), typed config dataclasses (`config`), name -> object registries and plug-ins
(`registry`), the table of training methods (`methods`, strings only), every id written to disk
(`identity`), safe file writes (`io`), logging (`logs`), lazy package exports (`lazy`) and the one
interface where training and evaluation meet (`interface`: ``encode(list[str]) -> float32 [n, dim]``)."""
