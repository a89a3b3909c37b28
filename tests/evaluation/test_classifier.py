"""The stacked classifier against a one-model-at-a-time loop reference written with torch
modules and optimizers, following SentEval's PyTorchClassifier.fit / trainepoch semantics."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sentkit.evaluation.classifier import (
    Job,
    TrainSpec,
    fit_batched,
    init_params,
    predict,
    relatedness_target,
    single_model_scorer,
    softmax,
)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The loop reference runs thousands of tiny torch ops: extra threads only add overhead."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _reference_fit(X, y, train, dev, l2, spec, validation_split=None):
    """SentEval's MLP.fit for one model (loop reference)."""
    rs = np.random.RandomState(spec.seed)
    g = torch.Generator().manual_seed(spec.seed)
    if spec.nhid == 0:
        model = torch.nn.Sequential(torch.nn.Linear(X.shape[1], spec.nclasses))
    else:
        model = torch.nn.Sequential(
            torch.nn.Linear(X.shape[1], spec.nhid),
            torch.nn.Dropout(0.0),
            torch.nn.Sigmoid(),
            torch.nn.Linear(spec.nhid, spec.nclasses),
        )
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=g)
            bound = 1 / math.sqrt(layer.weight.shape[1])
            torch.nn.init.uniform_(layer.bias, -bound, bound, generator=g)
    name = spec.optim.split(",")[0]
    opt_cls = {"adam": torch.optim.Adam, "rmsprop": torch.optim.RMSprop}[name]
    opt = opt_cls(model.parameters(), weight_decay=l2)
    if validation_split is not None:
        perm = rs.permutation(len(train))
        cut = int(validation_split * len(train))
        train, dev = train[perm[cut:]], train[perm[:cut]]
    Xtr, Xdv = torch.from_numpy(X[train]), torch.from_numpy(X[dev])
    ytr, ydv = torch.from_numpy(y[train]), torch.from_numpy(y[dev])
    loss_fn = torch.nn.CrossEntropyLoss() if spec.loss == "ce" else torch.nn.MSELoss()

    def out(xb):
        z = model(xb)
        return z if spec.loss == "ce" else torch.softmax(z, -1)

    nepoch, best, bestmodel, count, stop = 0, -1.0, None, 0, False
    while not stop and nepoch <= spec.max_epoch:
        model.train()
        for _ in range(spec.epoch_size):
            perm = rs.permutation(len(Xtr))
            for i in range(0, len(Xtr), spec.batch_size):
                idx = torch.from_numpy(perm[i : i + spec.batch_size])
                loss = loss_fn(out(Xtr[idx]), ytr[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        nepoch += spec.epoch_size
        with torch.no_grad():
            acc = int((model(Xdv).argmax(1) == ydv).sum()) / len(ydv)
        if acc > best:
            best, bestmodel = acc, copy.deepcopy(model)
        else:
            if count >= spec.tenacity:
                stop = True
            count += 1
    return best, bestmodel


def _data(n=240, d=6, c=3, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(c, d)) * 1.2
    y = rng.integers(0, c, size=n)
    X = (centers[y] + rng.normal(size=(n, d))).astype(np.float32)
    return X, y.astype(np.int64)


@pytest.mark.parametrize("optim", ["adam", "rmsprop"])
@pytest.mark.parametrize("nhid", [0, 5])
def test_stacked_fit_matches_loop_reference(optim, nhid):
    X, y = _data()
    spec = TrainSpec(nclasses=3, nhid=nhid, optim=optim, batch_size=16, tenacity=2, epoch_size=2, max_epoch=12)
    rng = np.random.default_rng(1)
    perm = rng.permutation(len(y))
    # jobs with different train sizes (ragged last minibatches), l2 values and a validation split
    jobs = [
        Job(train=perm[:150], dev=perm[150:200], l2=1e-5),
        Job(train=perm[:150], dev=perm[150:200], l2=1e-2),
        Job(train=perm[10:171], dev=perm[200:], l2=1e-3),
        Job(train=perm[:200], l2=1e-4, validation_split=0.05),
    ]
    fits = fit_batched(X, y, jobs, spec)
    for job, fit in zip(jobs, fits):
        ref_best, ref_model = _reference_fit(X, y, job.train, job.dev, job.l2, spec, job.validation_split)
        assert fit.best_score == pytest.approx(ref_best, abs=1e-9)
        with torch.no_grad():
            ref_logits = ref_model(torch.from_numpy(X)).numpy()
        np.testing.assert_allclose(predict(fit.params, X), ref_logits, atol=2e-4, rtol=1e-3)


def test_relatedness_loss_matches_loop_reference():
    X, yc = _data(n=160, d=5, c=5, seed=3)
    scores = np.clip(yc + 1 + np.random.default_rng(0).uniform(0, 0.9, len(yc)), 1, 5)
    T = relatedness_target(scores)
    spec = TrainSpec(nclasses=5, optim="adam", batch_size=16, tenacity=1, epoch_size=3, max_epoch=6, loss="mse_softmax")
    train, dev = np.arange(120), np.arange(120, 160)
    # score on class accuracy against argmax of the target so the reference loop can be reused
    ydev = T[dev].argmax(1)

    def dev_acc(params, dev_rows):
        return float((predict(params, X[dev_rows]).argmax(1) == ydev).mean())

    (fit,) = fit_batched(X, T, [Job(train=train, dev=dev, l2=0.0)], spec, scorer=single_model_scorer(dev_acc))
    yref = T.copy()
    # reference: same loop with MSE on softmax; dev accuracy vs argmax(target)
    rs = np.random.RandomState(spec.seed)
    g = torch.Generator().manual_seed(spec.seed)
    lin = torch.nn.Linear(5, 5)
    torch.nn.init.kaiming_uniform_(lin.weight, a=math.sqrt(5), generator=g)
    torch.nn.init.uniform_(lin.bias, -1 / math.sqrt(5), 1 / math.sqrt(5), generator=g)
    opt = torch.optim.Adam(lin.parameters())
    Xtr, Ttr = torch.from_numpy(X[train]), torch.from_numpy(yref[train])
    best, best_w, count, nepoch = -1.0, None, 0, 0
    while nepoch <= spec.max_epoch:
        for _ in range(spec.epoch_size):
            perm = rs.permutation(len(train))
            for i in range(0, len(train), spec.batch_size):
                idx = torch.from_numpy(perm[i : i + spec.batch_size])
                loss = torch.nn.functional.mse_loss(torch.softmax(lin(Xtr[idx]), -1), Ttr[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        nepoch += spec.epoch_size
        with torch.no_grad():
            acc = float((lin(torch.from_numpy(X[dev])).argmax(1).numpy() == ydev).mean())
        if acc > best:
            best, best_w = acc, lin.weight.detach().clone()
        else:
            if count >= spec.tenacity:
                break
            count += 1
    assert fit.best_score == pytest.approx(best)
    assert best_w is not None
    np.testing.assert_allclose(fit.params["w"].T, best_w.numpy(), atol=2e-4)


def test_init_matches_torch_linear():
    p = init_params(7, 3, 0, 1111)
    with torch.random.fork_rng():  # SentEval's way (global seed), without leaking it
        torch.manual_seed(1111)
        lin = torch.nn.Linear(7, 3)
    np.testing.assert_array_equal(p["w"], lin.weight.detach().numpy().T)
    np.testing.assert_array_equal(p["b"], lin.bias.detach().numpy())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=1.0, max_value=5.0, allow_nan=False), min_size=1, max_size=20))
def test_relatedness_target_is_a_distribution_with_the_right_mean(scores):
    t = relatedness_target(np.array(scores))
    np.testing.assert_allclose(t.sum(1), 1.0, atol=1e-6)
    np.testing.assert_allclose(t @ np.arange(1, 6), scores, atol=1e-5)
    assert (t >= 0).all()


def test_softmax_rows_sum_to_one():
    z = np.random.default_rng(0).normal(size=(4, 7)).astype(np.float32) * 30
    np.testing.assert_allclose(softmax(z).sum(1), 1.0, atol=1e-6)


@pytest.mark.parametrize("optim", ["adam", "rmsprop"])
def test_single_model_fast_path_matches_loop_reference(optim):
    X, y = _data(n=200, seed=5)
    spec = TrainSpec(nclasses=3, optim=optim, batch_size=32, tenacity=1, epoch_size=2, max_epoch=8)
    job = Job(train=np.arange(180), l2=1e-3, validation_split=0.1)
    (fit,) = fit_batched(X, y, [job], spec)
    ref_best, ref_model = _reference_fit(X, y, job.train, None, job.l2, spec, job.validation_split)
    assert fit.best_score == pytest.approx(ref_best, abs=1e-9)
    with torch.no_grad():
        ref_logits = ref_model(torch.from_numpy(X)).numpy()
    np.testing.assert_allclose(predict(fit.params, X), ref_logits, atol=2e-4, rtol=1e-3)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 20), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_short_axis_reductions_match_numpy(C, n, seed):
    from sentkit.evaluation.classifier import _last_axis

    z = np.random.default_rng(seed).normal(size=(n, 3, C)).astype(np.float32) * 10
    np.testing.assert_array_equal(_last_axis(np.maximum, z), z.max(-1, keepdims=True))
    np.testing.assert_allclose(_last_axis(np.add, z), z.sum(-1, keepdims=True), rtol=1e-5, atol=1e-4)
    p = softmax(z)
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(p.argmax(-1), z.argmax(-1))
