"""carpool's deployment: a CDK app (``infra/app.py``) and the layer build (``python -m infra.layer``).

Every concern has its own construct module (state, events, functions, cluster access, monitoring, nag
suppressions) so a reviewer can check one of them without reading the others. ``layer.py`` imports no
CDK so that ``make layer`` and ``bench/`` stay fast.
"""
