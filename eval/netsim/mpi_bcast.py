"""MPI_Bcast / MPI_Gather timing for eval/netsim/broadcast.sh --algorithm mpi (run under mpirun).

usage: mpi_bcast.py BYTES REPEAT [bcast|gather]; rank 0 is the root and prints one line per run:
nodes=N bytes=B algorithm=mpi seconds=S  (N = ranks other than the root; time from a barrier
before the collective to a barrier after it). bcast: rank 0's BYTES to every rank; gather: BYTES
from every rank to rank 0 (checked there).
"""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
size, repeat = int(sys.argv[1]), int(sys.argv[2])
collective = sys.argv[3] if len(sys.argv) > 3 else "bcast"


def piece(rank):
    return ((np.arange(size, dtype=np.uint64) * 31 + rank * 7) % 251).astype(np.uint8)


if collective == "gather":
    mine = piece(comm.rank)
    everything = np.empty(size * comm.size, dtype=np.uint8) if comm.rank == 0 else None
    for _ in range(repeat):
        comm.Barrier()
        t = MPI.Wtime()
        comm.Gather(mine, everything, root=0)
        comm.Barrier()
        elapsed = MPI.Wtime() - t
        if comm.rank == 0:
            for r in range(comm.size):
                assert np.array_equal(everything[r * size:(r + 1) * size], piece(r)), f"rank {r}"
            print(f"nodes={comm.size - 1} bytes={size} algorithm=mpi seconds={elapsed:.6f}", flush=True)
    sys.exit(0)

buf = np.empty(size, dtype=np.uint8)
if comm.rank == 0:
    buf[:] = np.arange(size, dtype=np.uint64).astype(np.uint8)
for _ in range(repeat):
    comm.Barrier()
    t = MPI.Wtime()
    comm.Bcast(buf, root=0)
    comm.Barrier()
    elapsed = MPI.Wtime() - t
    ok = comm.reduce(int(buf[size // 2] == np.uint8(size // 2 % 256)) if size else 1, op=MPI.SUM, root=0)
    if comm.rank == 0:
        assert ok == comm.size, "a rank holds a wrong message"
        print(f"nodes={comm.size - 1} bytes={size} algorithm=mpi seconds={elapsed:.6f}", flush=True)
