"""Reads that judge a pair: the verdict of an audit, the speed-up, 'is it worse?'."""
