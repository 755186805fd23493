"""Stage test: the checkout's pytest run, its environment checks, smoke run and reruns."""
