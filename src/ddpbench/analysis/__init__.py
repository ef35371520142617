"""Paired overhead analysis (:mod:`.paired`) and the statistics it uses (:mod:`.stats`)."""

from ddpbench.analysis.paired import Analysis, Comparison, analysis_to_dict, analyze, pair_table
from ddpbench.analysis.stats import PairedSummary, paired_summary, t_cdf, t_ppf

__all__ = [
    "Analysis",
    "Comparison",
    "PairedSummary",
    "analysis_to_dict",
    "analyze",
    "pair_table",
    "paired_summary",
    "t_cdf",
    "t_ppf",
]
