"""``python -m gemm_driver profile``: one verified case under Nsight Compute, beside its baseline.

- ncu.py: find ncu, ask it which metrics this GPU has, run it, read its CSV.
- metrics.py: the curated metrics, their labels and units, and the table's rows.
- target.py: the process ncu profiles (``python -m gemm_driver.profile.target``): it
  builds and verifies the case, then launches the kernel, a marker and the baseline once
  each between cuProfilerStart and cuProfilerStop.
- command.py: the command's arguments, the run, the table and the JSON.
"""
