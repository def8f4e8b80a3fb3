"""dnnbench's public Python API (installed as the package `dnnbench`): `dnnbench.results`
loads a results database as pandas frames. The harness's own modules stay internal."""
