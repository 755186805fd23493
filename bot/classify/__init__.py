"""Stage classify: the test results and machine errors made into one verdict."""
