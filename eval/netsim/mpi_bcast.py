"""MPI_Bcast timing for eval/netsim/broadcast.sh --algorithm mpi (run under mpirun).

usage: mpi_bcast.py BYTES REPEAT; rank 0 is the root and prints one line per run:
nodes=N bytes=B algorithm=mpi seconds=S  (N = receiving ranks; time from a barrier before the
broadcast to a barrier after it, so every rank holds the message)
"""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
size, repeat = int(sys.argv[1]), int(sys.argv[2])
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
