// Anchor translation unit of the precompiled GoogleTest header shared by every test executable.
