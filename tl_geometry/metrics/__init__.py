"""Pure metric functions, one module per paper family.

Rule of the house: nothing here touches a model or a hook. The math takes tensors and returns
frozen dataclasses; the thin registered wrappers read models only through
:mod:`tl_geometry.capture`.
"""
