"""Executing pipelines: weights, model runners with KV caches, the decode loop, token forcing."""
