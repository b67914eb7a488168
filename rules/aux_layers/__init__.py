"""Gate ``aux-layers`` (EA312): the drafter config's ``eagle_aux_hidden_state_layer_ids`` must name
layers the target has.

``facts.py`` finds where the runner reads the ids (index pass); ``rule.py`` judges a run."""

from rules.aux_layers.rule import AuxLayersRule

__all__ = ["AuxLayersRule"]
