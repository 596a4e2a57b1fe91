// Empty: exists so that the precompiled header has a target to be built in.
