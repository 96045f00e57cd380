"""The alert rules as a Prometheus rule file: what of the rule pack can be said in PromQL over the
series `/metrics` serves (`catalogue.py`), and why the rest cannot."""
