"""Model files (privclust.io) and input readers (privclust._readers)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from privclust import DPM, Budget, PrivacyReport
from privclust import io as pio
from privclust._readers import read_table
from privclust.io import (
    ModelFormatError,
    load_model,
    model_from_dict,
    model_to_dict,
    privacy_report_from_dict,
    register_model,
    registered_estimators,
    save_model,
)
from privclust.privacy import Release

SEED = 12345


@pytest.fixture(scope="module")
def data():
    X, _ = make_blobs(
        20000,
        2,
        centers=[[-20, -20], [20, 20], [-20, 20], [20, -20]],
        cluster_std=2.0,
        random_state=0,
    )
    return X


@pytest.fixture(scope="module")
def model(data):
    m = DPM(epsilon=1.0, bounds=(-40, 40), random_state=SEED).fit(data)
    assert m.n_clusters_ >= 2
    return m


# --------------------------------------------------------------------------------------------
# model files
# --------------------------------------------------------------------------------------------


def test_round_trip_predicts_the_same(model, data, tmp_path):
    path = save_model(model, tmp_path / "m.json")
    loaded = load_model(path)
    assert isinstance(loaded, DPM)
    np.testing.assert_array_equal(loaded.predict(data), model.predict(data))
    new = np.random.default_rng(1).uniform(-45, 45, size=(500, 2))
    np.testing.assert_array_equal(loaded.predict(new), model.predict(new))
    np.testing.assert_array_equal(loaded.cluster_centers_, model.cluster_centers_)
    np.testing.assert_array_equal(loaded.cluster_sizes_, model.cluster_sizes_)
    np.testing.assert_array_equal(loaded.interval_size_, model.interval_size_)
    assert loaded.n_clusters_ == model.n_clusters_
    assert loaded.n_features_in_ == 2
    assert loaded.delta_ == model.delta_
    assert loaded.min_cluster_size_ == model.min_cluster_size_
    assert loaded.n_split_candidates_ == model.n_split_candidates_
    assert loaded.split_tree_.to_dict() == model.split_tree_.to_dict()
    np.testing.assert_array_equal(loaded.split_tree_.apply(data), model.split_tree_.apply(data))


def test_round_trip_params_and_report(model, tmp_path):
    loaded = load_model(save_model(model, tmp_path / "m.json"))
    params, orig = loaded.get_params(), model.get_params()
    assert params["random_state"] is None  # the seed is never stored
    for key in ("epsilon", "delta", "max_depth", "t", "q", "alpha", "min_cluster_size"):
        assert params[key] == orig[key]
    assert tuple(params["bounds"]) == tuple(orig["bounds"])
    assert tuple(params["budget_split"]) == tuple(orig["budget_split"])
    report = loaded.privacy_report_
    assert isinstance(report, PrivacyReport)
    assert report.total() == model.privacy_report_.total()
    assert report.planned == model.privacy_report_.planned
    assert len(report.releases) == len(model.privacy_report_.releases)
    assert report.notes == model.privacy_report_.notes
    assert "Privacy report for DPM" in str(report)


def test_file_holds_no_labels_data_or_seed(model, data, tmp_path):
    path = save_model(model, tmp_path / "m.json")
    text = path.read_text()
    d = json.loads(text)
    assert set(d) == {
        "format",
        "version",
        "estimator",
        "privclust_version",
        "params",
        "model",
        "privacy_report",
    }
    assert d["format"] == "privclust-model" and d["version"] == 1 and d["estimator"] == "DPM"
    assert "labels" not in text
    assert "accountant" not in d["params"]
    assert str(SEED) not in text
    assert "not stored" in d["params"]["random_state"]
    assert "not recorded" in d["privacy_report"]["random_source"]
    # no training record appears in the file
    for row in data[:20]:
        assert repr(float(row[0])) not in text
    assert set(d["model"]) == {
        "cluster_centers",
        "cluster_sizes",
        "n_clusters",
        "split_tree",
        "interval_size",
        "n_split_candidates",
        "min_cluster_size",
        "delta",
        "n_features_in",
        "bounds",  # the public bounds the fit clipped to
    }


def test_model_to_dict_is_plain_json(model):
    d = model_to_dict(model)
    text = json.dumps(d, allow_nan=False)  # no NaN/inf, no numpy types
    again = model_from_dict(json.loads(text))
    np.testing.assert_array_equal(again.cluster_centers_, model.cluster_centers_)


def test_secure_model_description(data):
    m = DPM(epsilon=1.0, bounds=(-40, 40)).fit(data[:3000])
    d = model_to_dict(m)
    assert d["params"]["random_state"].startswith("None (secure")
    assert d["privacy_report"]["random_source"].startswith("secure")


def test_save_unfitted_or_unknown_estimator(tmp_path):
    with pytest.raises(ValueError, match="not fitted"):
        save_model(DPM(epsilon=1.0, bounds=(0, 1)), tmp_path / "m.json")
    with pytest.raises(TypeError, match="cannot save a KMeans"):
        model_to_dict(KMeans(2))


def test_save_to_missing_folder(model, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        save_model(model, tmp_path / "nope" / "m.json")


@pytest.fixture
def saved(model, tmp_path):
    path = save_model(model, tmp_path / "m.json")
    return path, json.loads(path.read_text())


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_model(tmp_path / "nope.json")


def test_not_a_privclust_file(tmp_path):
    p = tmp_path / "flame.json"
    p.write_text(json.dumps({"name": "flame", "bounds": [[0, 15], [14, 28]]}))
    with pytest.raises(ModelFormatError, match="not a privclust model"):
        load_model(p)
    p.write_text("[1, 2, 3]")
    with pytest.raises(ModelFormatError, match="not a privclust model"):
        load_model(p)


def test_wrong_version(saved, tmp_path):
    _, d = saved
    d["version"] = 99
    p = tmp_path / "v99.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ModelFormatError, match="version 99.*upgrade"):
        load_model(p)
    d["version"] = "one"
    p.write_text(json.dumps(d))
    with pytest.raises(ModelFormatError, match="invalid format version"):
        load_model(p)


def test_truncated_and_empty_file(saved, tmp_path):
    path, _ = saved
    text = path.read_text()
    p = tmp_path / "cut.json"
    p.write_text(text[: len(text) // 2])
    with pytest.raises(ModelFormatError, match="not valid JSON.*truncated"):
        load_model(p)
    p.write_text("")
    with pytest.raises(ModelFormatError, match="empty"):
        load_model(p)
    assert issubclass(ModelFormatError, ValueError)


def test_malformed_sections(saved):
    _, d = saved
    bad = json.loads(json.dumps(d))
    bad["model"]["cluster_centers"] = [[1.0, 2.0, 3.0]]
    with pytest.raises(ModelFormatError, match=r'"cluster_centers" must be .* of shape \(k, 2\)'):
        model_from_dict(bad)
    bad = json.loads(json.dumps(d))
    del bad["model"]["split_tree"]
    with pytest.raises(ModelFormatError, match="missing key 'split_tree'"):
        model_from_dict(bad)
    bad = json.loads(json.dumps(d))
    bad["estimator"] = "Mystery"
    with pytest.raises(ModelFormatError, match="'Mystery'.*known: .*DPM"):
        model_from_dict(bad)
    bad = json.loads(json.dumps(d))
    bad["params"]["colour"] = "red"
    with pytest.raises(ModelFormatError, match="unknown parameter"):
        model_from_dict(bad)
    bad = json.loads(json.dumps(d))
    del bad["privacy_report"]
    with pytest.raises(ModelFormatError, match="privacy_report"):
        model_from_dict(bad)
    bad = json.loads(json.dumps(d))
    del bad["privacy_report"]["planned"]
    with pytest.raises(ModelFormatError, match="privacy report is malformed"):
        model_from_dict(bad)


def test_privacy_report_from_dict_round_trip():
    r = PrivacyReport("X", Budget(1.0, 1e-6), random_source="secure", notes=["n1"])
    r.add(Release("laplace", "count", epsilon=0.5, sensitivity=1.0, scale=2.0, n_released=3))
    r.add(Release("gaussian", "sum", epsilon=0.25, delta=1e-7, private=False, note="x"))
    back = privacy_report_from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.releases == r.releases
    assert back.total() == r.total() and back.planned == r.planned
    assert back.private is False and back.notes == ["n1"]


class _Toy(BaseEstimator):
    def __init__(self, epsilon=1.0, random_state=None):
        self.epsilon = epsilon
        self.random_state = random_state

    def predict(self, X):
        return np.zeros(len(X), dtype=int)


def test_registry_for_other_estimators():
    def dump(m):
        return {"centres": m.cluster_centers_.tolist()}

    def load(est, section):
        est.cluster_centers_ = np.asarray(section["centres"], dtype=float)

    register_model("Toy", _Toy, dump, load)
    try:
        assert "Toy" in registered_estimators()
        with pytest.raises(ValueError, match="already registered"):
            register_model("Toy", _Toy, dump, load)
        toy = _Toy(epsilon=0.5, random_state=3)
        toy.cluster_centers_ = np.array([[1.0, 2.0]])
        toy.privacy_report_ = PrivacyReport("Toy", Budget(0.5), random_source="seed=3")
        d = json.loads(json.dumps(model_to_dict(toy)))
        assert d["estimator"] == "Toy" and d["params"]["epsilon"] == 0.5
        back = model_from_dict(d)
        assert isinstance(back, _Toy) and back.random_state is None
        np.testing.assert_array_equal(back.cluster_centers_, [[1.0, 2.0]])
        assert back.privacy_report_.random_source == "seed=<not stored>"
    finally:
        pio._EXTRA_CODECS.pop("Toy", None)
    assert "Toy" not in registered_estimators()


# --------------------------------------------------------------------------------------------
# readers
# --------------------------------------------------------------------------------------------


def test_csv_with_header(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("x,y\n1,2\n3.5,-4e1\n")
    X, names = read_table(p)
    assert names == ["x", "y"]
    np.testing.assert_array_equal(X, [[1, 2], [3.5, -40]])
    assert X.dtype == np.float64


def test_csv_without_header(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("1,2,3\n4,5,6\n")
    X, names = read_table(p)
    assert names == ["x0", "x1", "x2"] and X.shape == (2, 3)
    X, names = read_table(p, has_header=True)
    assert names == ["1", "2", "3"] and X.tolist() == [[4, 5, 6]]
    with pytest.raises(ValueError, match="has_header"):
        read_table(p, has_header="maybe")


def test_csv_semicolon_tsv_comments_and_missing(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("# comment\na;b\n1;2\n\n3;\n")
    X, names = read_table(p)
    assert names == ["a", "b"]
    assert X[0].tolist() == [1, 2] and X[1, 0] == 3 and np.isnan(X[1, 1])
    t = tmp_path / "a.tsv"
    t.write_text("1\t2\n3\t4\n")
    assert read_table(t)[0].tolist() == [[1, 2], [3, 4]]


def test_csv_quotes_spaces_and_whitespace_txt(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text('"a", "b"\n"1.5", 2\n 3 ,"4"\n')
    X, names = read_table(p)
    assert names == ["a", "b"] and X.tolist() == [[1.5, 2], [3, 4]]
    t = tmp_path / "w.txt"
    t.write_text("1 2  3\n4\t5 6\n")
    assert read_table(t)[0].tolist() == [[1, 2, 3], [4, 5, 6]]


def test_csv_non_numeric_column(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("x,city,y\n1,Paris,2\n3,Rome,4\n")
    with pytest.raises(ValueError, match="column 'city' is not numeric.*drop"):
        read_table(p)
    q = tmp_path / "b.csv"
    q.write_text("1,2,Paris\n3,4,Rome\n")
    with pytest.raises(ValueError, match=r"column 2 \(counted from 0\) is not numeric.*'Paris'"):
        read_table(q)


def test_csv_ragged_and_empty(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("1,2\n3,4,5\n")
    with pytest.raises(ValueError, match="line 2: 3 field"):
        read_table(p)
    p.write_text("")
    with pytest.raises(ValueError, match="empty"):
        read_table(p)
    p.write_text("x,y\n")
    with pytest.raises(ValueError, match="no data rows"):
        read_table(p)


def test_missing_file_and_unknown_extension(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_table(tmp_path / "nope.csv")
    p = tmp_path / "a.xlsx"
    p.write_text("x")
    with pytest.raises(ValueError, match="unknown file type '.xlsx'"):
        read_table(p)
    with pytest.raises(ValueError, match="is a folder"):
        read_table(tmp_path)


def test_npy(tmp_path):
    arr = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.save(tmp_path / "a.npy", arr)
    X, names = read_table(tmp_path / "a.npy")
    assert X.dtype == np.float32 and names == ["x0", "x1", "x2"]
    np.testing.assert_array_equal(X, arr)
    np.save(tmp_path / "i.npy", np.arange(6).reshape(3, 2))
    assert read_table(tmp_path / "i.npy")[0].dtype == np.float64
    np.save(tmp_path / "one.npy", np.arange(5.0))
    with pytest.raises(ValueError, match="1-D array.*reshape"):
        read_table(tmp_path / "one.npy")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="never unpickles"):
        read_table(tmp_path / "obj.npy")
    (tmp_path / "empty.npy").write_bytes(b"")
    with pytest.raises(ValueError, match="not a NumPy .npy file"):
        read_table(tmp_path / "empty.npy")
    cut = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(cut[: len(cut) - 10])
    with pytest.raises(ValueError, match="not a readable NumPy file"):
        read_table(tmp_path / "cut.npy")
    rec = np.zeros(3, dtype=[("a", float), ("b", np.int32)])
    rec["a"], rec["b"] = [1, 2, 3], [4, 5, 6]
    np.save(tmp_path / "rec.npy", rec)
    X, names = read_table(tmp_path / "rec.npy")
    assert names == ["a", "b"] and X.tolist() == [[1, 4], [2, 5], [3, 6]]


def test_npz(tmp_path):
    arr = np.arange(6.0).reshape(3, 2)
    np.savez(tmp_path / "x.npz", X=arr, y=np.arange(3))
    np.testing.assert_array_equal(read_table(tmp_path / "x.npz")[0], arr)
    np.savez(tmp_path / "only.npz", data=arr)
    np.testing.assert_array_equal(read_table(tmp_path / "only.npz")[0], arr)
    np.savez(tmp_path / "two.npz", a=arr, b=arr)
    with pytest.raises(ValueError, match="several arrays.*named 'X'"):
        read_table(tmp_path / "two.npz")
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(ValueError, match="not a readable NumPy file"):
        read_table(tmp_path / "bad.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ValueError, match="not a NumPy .npz archive"):
        read_table(tmp_path / "text.npz")


def test_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"a": [1.0, 2.0], "b": pa.array([3, None], type=pa.int64())})
    pq.write_table(table, tmp_path / "t.parquet")
    X, names = read_table(tmp_path / "t.parquet")
    assert names == ["a", "b"]
    assert X[:, 0].tolist() == [1, 2] and X[0, 1] == 3 and np.isnan(X[1, 1])
    pq.write_table(pa.table({"a": [1.0], "s": ["x"]}), tmp_path / "s.pq")
    with pytest.raises(ValueError, match="column 's' is not numeric.*drop"):
        read_table(tmp_path / "s.pq")


def test_parquet_without_pyarrow(tmp_path, monkeypatch):
    import sys

    (tmp_path / "t.parquet").write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=r"privclust\[parquet\]"):
        read_table(tmp_path / "t.parquet")


def test_dpdbscan_round_trip(tmp_path):
    from privclust import DPDBSCAN

    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(-5, 0.5, (1500, 2)), rng.normal(5, 0.5, (1500, 2))])
    model = DPDBSCAN(epsilon=1.0, eps=0.8, min_samples=10, bounds=(-10, 10), random_state=0).fit(X)
    path = tmp_path / "spans.json"
    pio.save_model(model, path)
    back = pio.load_model(path)
    assert type(back).__name__ == "DPDBSCAN"
    np.testing.assert_array_equal(back.predict(X), model.labels_)
    assert back.n_clusters_ == model.n_clusters_ == 2
    stored = json.loads(path.read_text())
    assert "labels_" not in stored["model"] and stored["params"]["random_state"] != 0


def test_mixture_and_morse_round_trip(tmp_path):
    from privclust import DPGaussianMixture, MorseMerging

    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal(c, 1.0, (1200, 2)) for c in (-6.0, 0.0, 6.0)])
    mix = DPGaussianMixture(n_components=4, epsilon=2.0, bounds=(-15, 15), random_state=0).fit(X)
    merged = MorseMerging(mix, n_clusters=3).fit(X)
    for model in (mix, merged):
        path = tmp_path / f"{type(model).__name__}.json"
        pio.save_model(model, path)
        back = pio.load_model(path)
        np.testing.assert_array_equal(back.predict(X), model.predict(X))
        assert "base_estimator" not in json.loads(path.read_text())["params"]


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("DPLloyd", {}),
        ("KMeansGuarantee", {"max_iter": 4}),
        ("SubClustering", {"max_iter": 3, "internal_k": 3}),
        ("KMeansGuarantee", {"max_iter": 3, "variant": "faithful"}),
    ],
    ids=["DPLloyd", "KMeansGuarantee", "SubClustering", "KMeansGuarantee-faithful"],
)
def test_kmeans_family_round_trip(name, kwargs, data, tmp_path):
    import privclust

    cls = getattr(privclust, name)
    model = cls(n_clusters=4, epsilon=2.0, bounds=(-40, 40), random_state=SEED, **kwargs)
    model.fit(data)
    path = save_model(model, tmp_path / "k.json")
    if kwargs.get("variant") == "faithful":  # loading a non-private model says so
        with pytest.warns(UserWarning, match="NOT differentially private"):
            back = load_model(path)
    else:
        back = load_model(path)
    assert type(back) is cls
    np.testing.assert_array_equal(back.predict(data), model.labels_)
    np.testing.assert_array_equal(back.cluster_centers_, model.cluster_centers_)
    np.testing.assert_array_equal(back.cluster_sizes_, model.cluster_sizes_)
    assert back.n_clusters_ == 4 and back.n_iter_ == model.n_iter_ and back.n_features_in_ == 2
    assert back.privacy_report_.total() == model.privacy_report_.total()
    assert back.privacy_report_.private is (kwargs.get("variant", "private") == "private")
    assert back.get_params()["variant" if "variant" in kwargs else "epsilon"] == (
        kwargs.get("variant", 2.0)
    )
    stored = json.loads(path.read_text())
    # only the final release: no labels, and nothing computed without noise (the exact costs,
    # the faithful variant's exact convergent zones)
    assert set(stored["model"]) == {
        "cluster_centers",
        "cluster_sizes",
        "n_clusters",
        "n_iter",
        "n_features_in",
        "bounds",  # the public bounds the fit clipped to
    }
    assert stored["params"]["random_state"].startswith("int seed (")
    assert str(SEED) not in stored["params"]["random_state"] + str(stored["privacy_report"])


def test_kmeans_family_malformed(data):
    from privclust import DPLloyd

    model = DPLloyd(n_clusters=3, epsilon=1.0, bounds=(-40, 40), random_state=0).fit(data)
    d = json.loads(json.dumps(model_to_dict(model)))
    bad = json.loads(json.dumps(d))
    bad["model"]["cluster_sizes"] = [1, 2]
    with pytest.raises(ModelFormatError, match="cluster_sizes has 2 entries for 3 centres"):
        model_from_dict(bad)
    bad = json.loads(json.dumps(d))
    bad["model"]["cluster_centers"][0][1] = None  # NaN is written as null
    with pytest.raises(ModelFormatError, match="non-finite"):
        model_from_dict(bad)
    bad = json.loads(json.dumps(d))
    del bad["model"]["n_iter"]
    with pytest.raises(ModelFormatError, match="missing key 'n_iter'"):
        model_from_dict(bad)


# --------------------------------------------------------------------------- tampered files
def _saved_dpm(tmp_path):
    from sklearn.datasets import make_blobs

    from privclust import DPM

    X, _ = make_blobs(6000, 2, centers=[[-10, -10], [10, 10], [10, -10]], cluster_std=1.0,
                      random_state=0)
    path = save_model(DPM(epsilon=1.0, delta=1e-6, bounds=(-15, 15), random_state=0).fit(X),
                      tmp_path / "m.json")
    return json.loads(path.read_text())


def _edit_params_epsilon(d):
    d["params"]["epsilon"] = -1


def _edit_spent(d):
    d["privacy_report"]["releases"][0]["epsilon"] = -5


def _edit_overspend(d):
    d["privacy_report"]["releases"][0]["epsilon"] = 50.0


def _edit_private_flag(d):
    d["privacy_report"]["private"] = False


def _edit_bounds(d):
    d["params"]["bounds"] = [10, -10]


def _edit_tree_feature(d):
    tree = d["model"]["split_tree"]
    inner = [i for i, f in enumerate(tree["feature"]) if f >= 0]
    tree["feature"][inner[0]] = 7


def _edit_centre_outside(d):
    d["model"]["cluster_centers"][0][0] = 1e6


@pytest.mark.parametrize(("edit", "match"), [
    (_edit_params_epsilon, "params"),
    (_edit_spent, "epsilon=-5"),
    (_edit_overspend, "more than its plan"),
    (_edit_private_flag, '"private": false'),
    (_edit_bounds, "bounds"),
    (_edit_tree_feature, "feature 7"),
    (_edit_centre_outside, "outside the model's bounds"),
])
def test_a_tampered_model_is_refused(tmp_path, edit, match):
    d = _saved_dpm(tmp_path)
    edit(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ModelFormatError, match=match):
        load_model(path)
