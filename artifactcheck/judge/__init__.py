"""The pure core: given observations and expectations, each instance's verdict and what to
do about it. No I/O, no clock it was not handed.
"""
