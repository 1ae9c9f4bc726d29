"""Pretraining the project's char-level encoder in PyTorch (training only; not part of the wheel).

See README.md beside this file.
"""
