"""Shipped model packages (imported as ``taskflow.resources``): ``<task>/<model>/manifest.json`` and its files."""
