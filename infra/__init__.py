"""carpool's deployment: a CDK app (``infra/app.py``) that also builds the Lambda layer (``infra/layer.py``).

Every concern has its own construct module (state, events, functions, cluster access, monitoring, nag
suppressions) so a reviewer can check one of them without reading the others. ``layer.py`` imports no
CDK so that ``python -m infra.layer`` and ``bench/`` stay fast; ``layer_asset.py`` plugs it into CDK.
"""
