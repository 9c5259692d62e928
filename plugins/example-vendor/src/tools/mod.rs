mod vendor_dump_inventory;
