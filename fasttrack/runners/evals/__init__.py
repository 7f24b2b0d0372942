"""The eval family: one lm-eval task on both sides, joined per item, decided with paired statistics.

``run`` is the check's entry point; ``compare`` joins and decides; ``tasks`` resolves lm-eval
task directories and runs one side; ``cache`` keeps the baseline's per-item results between runs.
"""
