"""How processes are started: locally now; mpirun, Slurm, containers and emulated hosts
share the same ProcessSpec in / JobResult out shape. Never imports frameworks/."""
