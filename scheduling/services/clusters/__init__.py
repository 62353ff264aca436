"""Clusters: kubeconfig and platform-field checks, submit warnings from what gangweb knows of a cluster, capacity, the
local control plane.
"""
