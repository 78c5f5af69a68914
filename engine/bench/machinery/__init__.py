"""What the bench commands share: the replayer, bench flags, timing statistics, results files, reports and
plots."""
