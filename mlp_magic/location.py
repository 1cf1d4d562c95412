"""Where this copy of mlp_magic lives (a leaf: standard library only).

``PACKAGE_PARENT`` goes first on the path of the helpers a rank starts (the GPU agent, the GPU
probe) and of the stacks scanner on other hosts, so that they run this mlp_magic wherever the
rank's working folder went and whatever the host has installed.
"""
from os import path as _path

PACKAGE_PARENT = _path.dirname(_path.dirname(_path.abspath(__file__)))
