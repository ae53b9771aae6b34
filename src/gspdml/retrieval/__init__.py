"""gspdml.retrieval"""
