"""acting"""
