"""faiss's flat (exact) search of the first rows of a u8 partition set against a vocabulary, timed.

usage: faiss_slice.py PARTS VOCABULARY ROWS  -> one CSV row on stdout:
rows,k,dims,implementation,threads,seconds,gmac_per_s,inertia
The rows are decoded as vocab decodes them (byte / 255 in f32); faiss gets 2 threads
(IndexFlatL2.search, k = 1 neighbour); the inertia is the sum of the nearest squared distances,
comparable with `vocab bench assign`'s (its exact labels give the same sum up to rounding).
"""
import pathlib
import sys
import time

import numpy as np


def read_u8_rows(parts, rows):
    out, left = [], rows
    manifest = (parts / "manifest.toml").read_text()
    files = [line.split('"')[1] for line in manifest.splitlines() if line.startswith("file = ")]
    for name in files:
        raw = np.fromfile(parts / name, dtype=np.uint8)
        assert raw[:8].tobytes() == b"VOCABFEA" and raw[10] == 2, f"{name}: not a u8 partition"
        dims = int(raw[12:16].view("<u4")[0])
        count = int(raw[16:24].view("<u8")[0])
        rec = raw[32:].reshape(count, 8 + dims)[:, 8:]
        take = min(left, count)
        out.append((rec[:take].astype(np.float32) / np.float32(255.0)))
        left -= take
        if left == 0:
            break
    return np.ascontiguousarray(np.concatenate(out))


def read_f32_bin(path):
    raw = np.fromfile(path, dtype=np.uint8)
    assert raw[:8].tobytes() == b"VOCABFEA" and raw[10] == 1
    dims = int(raw[12:16].view("<u4")[0])
    count = int(raw[16:24].view("<u8")[0])
    rec = np.dtype([("id", "<u4"), ("row", "<u2"), ("col", "<u2"), ("v", "<f4", (dims,))])
    return np.ascontiguousarray(raw[32:].view(rec)["v"][:count])


def main():
    import faiss

    parts, vocabulary, rows = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
    x = read_u8_rows(parts, rows)
    c = read_f32_bin(vocabulary)
    faiss.omp_set_num_threads(2)
    index = faiss.IndexFlatL2(c.shape[1])
    index.add(c)
    t = time.perf_counter()
    dist, _ = index.search(x, 1)
    seconds = time.perf_counter() - t
    macs = x.shape[0] * c.shape[0] * c.shape[1]
    print("rows,k,dims,implementation,threads,seconds,gmac_per_s,inertia")
    print(f"{x.shape[0]},{c.shape[0]},{c.shape[1]},faiss-flat,2,{seconds:.3f},{macs / seconds / 1e9:.1f},"
          f"{float(dist[:, 0].astype(np.float64).sum()):e}")


if __name__ == "__main__":
    main()
