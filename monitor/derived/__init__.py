"""What a finished run leaves behind: summary, rollups, evidence across runs, page cache."""
