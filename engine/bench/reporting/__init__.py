"""What the bench commands write: timing statistics (`stats`), the results folder (`run_folder`) and its
files with provenance (`results`), replay and trace reports (`replay_report`, `trace_report`) and plots
(`replay_plots`, `approx_plots`)."""
