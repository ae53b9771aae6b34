"""gspdml.evaluation"""
