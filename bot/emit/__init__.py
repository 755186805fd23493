"""Emitters: each renders a LaunchPlan into one artefact and decides nothing of its own."""
