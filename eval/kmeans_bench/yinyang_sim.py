"""Simulates Yinyang bounds (group filter only, no local filter) on a feature file in numpy, to
estimate how many point-centroid distances a pruned iteration needs.

usage: $(eval/setup-venv.sh) eval/kmeans_bench/yinyang_sim.py FEATURES.bin K ITERATIONS GROUPS
Lloyd from k random rows (seed 1) on all vectors; the bounds are simulated on 30,000 of them.
Prints per iteration: share skipped by the global filter, share of all distances evaluated,
share of labels changed, and agreement with brute force. Result of the run quoted in the
README: yinyang_sim.txt.
"""
import numpy as np, sys, time
path, k, iters, G = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
raw = np.fromfile(path, dtype=np.uint8)
X = np.ascontiguousarray(raw[32:].view(np.float32).reshape(-1, 514)[:, 2:])
n = X.shape[0]
rng = np.random.default_rng(1)
C = X[rng.choice(n, k, replace=False)].copy()
xx = (X.astype(np.float64)**2).sum(1)
def dists(Xs, C):
    cc = (C**2).sum(1)
    return np.maximum((Xs**2).sum(1)[:,None] - 2*Xs@C.T + cc[None,:], 0)
def lloyd_step(C):
    lab = np.empty(n, np.int64)
    for s in range(0, n, 20000):
        lab[s:s+20000] = dists(X[s:s+20000], C).argmin(1)
    cnt = np.bincount(lab, minlength=k)
    S = np.zeros((k,512)); np.add.at(S, lab, X)
    newC = C.copy(); nz = cnt>0; newC[nz] = (S[nz]/cnt[nz,None]).astype(np.float32)
    return newC
Cs=[C]
for t in range(iters):
    t0=time.time(); Cs.append(lloyd_step(Cs[-1])); print("iter",t+1,time.time()-t0, file=sys.stderr)
# groups: kmeans of initial centroids into G groups (5 iterations)
gc = C[rng.choice(k, G, replace=False)].copy()
for _ in range(5):
    gl = dists(C, gc).argmin(1)
    for g in range(G):
        m = gl==g
        if m.any(): gc[g]=C[m].mean(0)
gl = dists(C, gc).argmin(1)
sub = rng.choice(n, 30000, replace=False); Xs = X[sub]
# iteration 1: full pass with centroids Cs[0]
D = np.sqrt(dists(Xs, Cs[0])); a = D.argmin(1); m=len(sub)
u = D[np.arange(m), a].copy()
Dm = D.copy(); Dm[np.arange(m), a] = np.inf
lb = np.stack([Dm[:, gl==g].min(1) if (gl==g).any() else np.full(m,np.inf) for g in range(G)],1)
gsize = np.bincount(gl, minlength=G)
for t in range(1, iters+1):
    Cn = Cs[t]; drift = np.sqrt(((Cn-Cs[t-1])**2).sum(1))
    gdrift = np.array([drift[gl==g].max() if (gl==g).any() else 0 for g in range(G)])
    u = u + drift[a]; lb = lb - gdrift[None,:]
    D = np.sqrt(dists(Xs, Cn))  # truth
    evals = 0; skip=0
    newa = a.copy()
    for i in range(m):
        glb = lb[i].min()
        if u[i] <= glb: skip+=1; continue
        u[i] = D[i,a[i]]; evals += 1
        if u[i] <= glb: skip+=1; continue
        ex = np.nonzero(lb[i] < u[i])[0]
        cand = np.isin(gl, ex)
        evals += cand.sum()
        best = a[i]; bd = u[i]
        cidx = np.nonzero(cand)[0]
        j = cidx[D[i,cidx].argmin()]
        if D[i,j] < bd: best=j; bd=D[i,j]
        # update lbs of examined groups exactly (excluding best)
        for g in ex:
            idx = np.nonzero(gl==g)[0]; idx = idx[idx!=best]
            lb[i,g] = D[i,idx].min() if len(idx) else np.inf
        if best != a[i]:
            g0 = gl[a[i]]
            if g0 not in ex: lb[i,g0] = min(lb[i,g0], D[i,a[i]])
        newa[i]=best; u[i]=bd
    truth = D.argmin(1)
    print(f"iter {t+1}: skip {skip/m:.3f} eval-frac {evals/(m*k):.3f} changed {(newa!=a).mean():.4f} exact {np.mean(newa==truth):.4f}")
    a = newa
