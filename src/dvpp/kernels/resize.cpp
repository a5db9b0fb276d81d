// resize.cpp — placeholder until its owner lands the resize kernels: one trivial kernel, so the family builds.
RT_KERNEL void dvpp_resize_placeholder(uint8_t* out, uint32_t pitch) { out[get_global_id(1) * pitch + get_global_id(0)] = 0; }
