"""turngym.tools"""
