"""turngym.trainers"""
