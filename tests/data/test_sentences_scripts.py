"""split_sentences on scripts other than Latin: CJK marks with no space after them, the terminators
of other scripts, capitals of other scripts, and the lower-case rule kept for abbreviations."""

from __future__ import annotations

import pytest

from sentkit.data.sentences import split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # CJK: no space after the mark; closing brackets stay with their sentence
        ("今天下雨了。我们在家。", ["今天下雨了。", "我们在家。"]),
        ("他说：「你好。」然后走了。对吗？是的！", ["他说：「你好。」", "然后走了。", "对吗？", "是的！"]),
        ("東京に行きました．楽しかった｡また", ["東京に行きました．", "楽しかった｡", "また"]),
        ("値は３．５です。", ["値は３．５です。"]),  # a fullwidth decimal point is not an end
        # other scripts' terminators
        ("यह एक वाक्य है। यह दूसरा है।", ["यह एक वाक्य है।", "यह दूसरा है।"]),
        ("هل أنت هنا؟ نعم", ["هل أنت هنا؟", "نعم"]),
        ("ဒါက စာကြောင်း။ နောက်တစ်ခု", ["ဒါက စာကြောင်း။", "နောက်တစ်ခု"]),
        # a capital of another script, or a letter of a script without case, opens a sentence
        ("Привет. Как дела? Хорошо.", ["Привет.", "Как дела?", "Хорошо."]),
        ("Done. 你好", ["Done.", "你好"]),
        ("Il pleut. Écoute.", ["Il pleut.", "Écoute."]),
        # kept: no cut before a lower-case word (an abbreviation the list does not hold)
        ("It costs approx. ten pounds. Then", ["It costs approx. ten pounds.", "Then"]),
        ("Привет. как дела", ["Привет. как дела"]),
    ],
)
def test_split_sentences_other_scripts(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected
