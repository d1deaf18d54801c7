"""The idioms every room shares (docs/architecture.md, *kernel/*): declared settings (``options.py``, ``ranges.py``),
discovery of declared specs (``declared.py``), the providers' specs (``providers.py``, ``provider_spec.py``,
``node_labels.py``) and the labels every surface prints codes with (``labels.py``). It imports no other room."""
