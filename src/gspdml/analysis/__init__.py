"""gspdml.analysis"""
