"""Shared set-ups of the Dask engine's tests: the four chunkings every equality test runs on,
and the command line on a Parquet folder beside the same records in memory."""

from __future__ import annotations

import numpy as np

#: Row chunkings of ``n`` records: one chunk, uneven chunks, a one-row chunk, an empty chunk.
CHUNKINGS = {
    "one": lambda n: (n,),
    "uneven": lambda n: (7, n // 2 - 7, n - n // 2),
    "one-row": lambda n: (1, n - 1),
    "empty": lambda n: (5, 0, n - 5),
}


def parquet_folder(X, folder):
    """``X`` written as three Parquet files in ``folder`` (created), columns ``a, b, c, ...``."""
    import pandas as pd

    folder.mkdir()
    names = [chr(ord("a") + j) for j in range(X.shape[1])]
    for i, part in enumerate(np.array_split(X, 3)):
        pd.DataFrame(part, columns=names).to_parquet(folder / f"part{i}.parquet")
    return folder


def cluster_on_both_engines(client, tmp_path, X, common) -> tuple[int, int]:
    """``privclust cluster`` with the options ``common`` on a Parquet folder of ``X`` with
    ``--engine dask`` on ``client``'s scheduler (model in ``tmp_path / "d.json"``) and on
    ``X.npy`` with the NumPy engine (``tmp_path / "n.json"``): the two exit codes."""
    from privclust import cli

    folder = parquet_folder(X, tmp_path / "data.parquet")
    np.save(tmp_path / "X.npy", X)
    on_dask = cli.main(["cluster", str(folder), *common, "--engine", "dask", "--scheduler",
                        client.scheduler.address, "--out", str(tmp_path / "d.json")])
    in_memory = cli.main(["cluster", str(tmp_path / "X.npy"), *common,
                          "--out", str(tmp_path / "n.json")])
    return on_dask, in_memory
