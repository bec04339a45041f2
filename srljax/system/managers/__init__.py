"""managers"""
