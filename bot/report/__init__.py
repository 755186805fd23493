"""Stage report: the reports written and checked by the validators."""
