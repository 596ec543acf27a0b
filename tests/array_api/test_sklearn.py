"""scikit-learn's array API dispatch on wgcompute arrays: PCA, LinearDiscriminantAnalysis and
Ridge fit and predict with wgcompute.array_api arrays in and out, matching the same estimators
on numpy arrays.

scikit-learn needs SCIPY_ARRAY_API=1 set before scipy is first imported, so each case runs in
a fresh interpreter."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("sklearn", reason="scikit-learn is a dev dependency (pip install .[dev])")

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import sklearn
    import wgcompute.array_api as xp
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 12)).astype(np.float32)
    X[:, 3] += 2 * X[:, 0]
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int32) + (X[:, 2] > 1).astype(np.int32)
    target = (X @ rng.standard_normal(12)).astype(np.float32)
    Xg, yg, tg = xp.asarray(X), xp.asarray(y), xp.asarray(target)

    def fit(make, numpy_args, wgc_args, out):
        ref = make().fit(*numpy_args)
        with sklearn.config_context(array_api_dispatch=True):
            est = make().fit(*wgc_args)
            got = out(est, wgc_args[0])
        want = out(ref, numpy_args[0])
        assert type(got).__module__.startswith("wgcompute"), type(got)
        return np.asarray(got.to_numpy(), dtype=np.float64), np.asarray(want, np.float64)

    name = sys.argv[1]
    if name == "pca":
        got, want = fit(lambda: PCA(n_components=4, svd_solver="full"), (X,), (Xg,),
                        lambda e, a: e.transform(a))
        got, want = np.abs(got), np.abs(want)  # a component's sign is arbitrary
    elif name == "lda":
        got, want = fit(LinearDiscriminantAnalysis, (X, y), (Xg, yg),
                        lambda e, a: e.predict_proba(a))
    else:
        got, want = fit(lambda: Ridge(alpha=1.0, solver="svd"), (X, target), (Xg, tg),
                        lambda e, a: e.predict(a))
    print(json.dumps({"err": float(np.max(np.abs(got - want))),
                      "scale": float(np.max(np.abs(want)))}))
""")


@pytest.mark.parametrize("estimator", ["pca", "lda", "ridge"])
def test_estimator_on_wgcompute_arrays_matches_numpy(estimator):
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    r = subprocess.run([sys.executable, "-c", SCRIPT, estimator], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["err"] <= 1e-3 * max(1.0, result["scale"]), result
