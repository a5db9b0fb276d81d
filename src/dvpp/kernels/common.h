// common.h — placeholder until its owner lands it (a family's module is common.h, the maths it needs, then its .cpp).
