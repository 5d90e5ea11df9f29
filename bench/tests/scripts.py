"""Loads a bench tool (a Python script without a .py suffix in bench/) as a module, for tests."""

import importlib.machinery
import importlib.util
import os

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def path(name):
    return os.path.join(BENCH, name)


def load(name):
    module_name = name.replace("-", "_")
    loader = importlib.machinery.SourceFileLoader(module_name, path(name))
    spec = importlib.util.spec_from_loader(module_name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
