"""moto's response serializer picking each answer's attributes without re-deriving their names per value.

moto renders an answer from its model objects through the operation's output shape: for every member
of every structure it asks its `AttributePicker` where the value lives, and the picker builds six alias
providers (an object each) and asks each whether the member's name has an alias, for every value of
every answer. An EC2 DescribeInstances of 40 instances asked ~10,000 times, ~60% of rendering it
(the kubelets of a simulation poll their instances every tick). Which names a picker tries, in which
order, depends only on the picker (its class and providers), the class of the object and its
`Meta.serialization_aliases`, the member's name and its shape (whose name, serialization name and
parent structure the providers read): `_RememberedAliases` keeps those names per combination and
looks the value up on each object exactly as moto does (the first name the object has a value for,
then the response transformers). Pickers other than moto's two, or with other providers, and any
combination whose names could not be listed, take moto's own code.
"""

from __future__ import annotations

import threading
from typing import Any

from carpool.sim.localaws.moto_patches import Internal, MotoPatch, Replaced

_SERIALIZE = "moto.core.serialize"
#: the providers whose answers depend only on the memo's key: (has_alias, get_alias) fingerprints of each
#: (their methods rather than the classes: a class's source is found by parsing its whole module)
_PROVIDERS = {"ExplicitAlias": ("1d7d27db6ed09fa4", "bf80cba8f8d1fe10"),
              "ShapeNameAlias": ("68e7bd0c0b594145", "d9824e7a9d51ae93"),
              "NoAlias": ("0e67116c5e06ccd0", "9b2265ccaa6030d8"),
              "ShapePrefixAlias": ("4d74e2ed511fb2c6", "5bcbddd6f88fc754"),
              "ClassPrefixAlias": ("b2e0c50e1aa5ec92", "4e3a700be9dd3c2a"),
              "ModelAlias": ("1929a8cbf1d90438", "dda26224b992a181")}
#: remembered combinations at most (a process serves a few hundred; the bound only guards a runaway)
_MEMO_LIMIT = 20_000


class _RememberedAliases(MotoPatch):
    """`AttributePicker.__call__` with the names to try remembered per (picker, object class and
    aliases, member name, shape); the lookups on the object are moto's, in moto's order."""

    replaces = (Internal(_SERIALIZE, "AttributePicker.__call__", "c15da8ec29c1afa4"),)
    relies_on = (
        Internal(_SERIALIZE, "AttributePicker.get_possible_keys", "cb284052c5ea7fe1"),
        Internal(_SERIALIZE, "XFormedAttributePicker.get_possible_keys", "f0d20f55f37fd8a1"),
        Internal(_SERIALIZE, "AttributeAliasProvider.__init__", "16c5a65e3da34bea"),
        *(Internal(_SERIALIZE, f"{name}.{method}", fp) for name, fps in _PROVIDERS.items()
          for method, fp in zip(("has_alias", "get_alias"), fps, strict=True)),
        # sets each member shape's `parent` (which two providers read) before picking its value
        Internal(_SERIALIZE, "ResponseSerializer._serialize_type_structure", "f9b47068f40ce489"),
        Internal("moto.core.utils", "get_value", "9b06b87ce416131e"),
        Internal("moto.core.utils", "_get_value_for_key", "563aa7bc75bd5bb0"),
    )

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.core import serialize

        picker_type = serialize.AttributePicker
        original = picker_type.__dict__["__call__"]
        listed = (picker_type.__dict__["get_possible_keys"],
                  serialize.XFormedAttributePicker.__dict__["get_possible_keys"])
        known = frozenset(getattr(serialize, name) for name in _PROVIDERS)
        get_value, missing = serialize.get_value, serialize.MISSING  # the names moto's `__call__` reads
        memo: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        lock = threading.Lock()

        def names_for(self: Any, context: Any, key: tuple[Any, ...], aliases: Any) -> list[str] | None:
            """The names moto's picker tries for this combination (None: not one the memo may keep)."""
            providers = self.alias_providers
            if type(self).get_possible_keys not in listed or not all(p in known for p in providers):
                return None
            try:
                names = list(self.get_possible_keys(context))
            except Exception:  # noqa: BLE001 - moto's own code raises it again, lazily, where it would
                return None
            with lock:
                if len(memo) >= _MEMO_LIMIT:
                    memo.clear()
                # the objects the key names by identity are kept with the names, so no id is reused meanwhile
                memo[key] = (providers, aliases, names)
            return names

        def __call__(self: Any, context: Any) -> Any:
            obj = context.obj
            meta = getattr(obj, "Meta", None)
            aliases = getattr(meta, "serialization_aliases", None) if meta is not None else None
            key = (type(self), id(self.alias_providers), obj.__class__, id(aliases), context.key, context.shape)
            found = memo.get(key)
            if found is not None and found[0] is self.alias_providers and found[1] is aliases:
                names = found[2]
            else:
                names = names_for(self, context, key, aliases)
                if names is None:
                    return original(self, context)
            value = None
            for name in names:
                candidate = get_value(obj, name, missing)
                if candidate is not missing:
                    value = candidate
                    break
            if self.response_transformers:
                key_path = f"{context.key_path}.{context.key}"
                for transform_path, transform in self.response_transformers.items():
                    if key_path.endswith(transform_path):
                        value = transform(value)
                        break
            return value

        picker_type.__call__ = __call__  # type: ignore[method-assign]
        return [(picker_type, "__call__", original)]


PATCHES: tuple[type[MotoPatch], ...] = (_RememberedAliases,)
