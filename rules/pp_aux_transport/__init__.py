"""Gate ``pp-aux-transport`` (EA310): EAGLE-3 under pipeline parallelism needs the aux hidden
states of earlier stages carried to the last one.

``facts.py`` finds the check that the inner model declares the transport (index pass);
``rule.py`` judges a target."""

from rules.pp_aux_transport.rule import PPAuxTransportRule

__all__ = ["PPAuxTransportRule"]
