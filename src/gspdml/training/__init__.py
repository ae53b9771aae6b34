"""gspdml.training"""
