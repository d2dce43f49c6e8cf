"""`lcg eval`: compare extraction backends on the same frozen inputs, against a noise floor."""
