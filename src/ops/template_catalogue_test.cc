// Templates as tenants name them (ops/template_catalogue.h): resolved,
// opened and checked over a real template store, and a create through the
// lifecycle over the fake node.
#include "ops/template_catalogue.h"

#include "ops/testing/lifecycle_fixture.h"
#include "templates/naming.h"

namespace vessel::ops {
namespace {

using ::testing::HasSubstr;
using TemplateCatalogueTest = testing::LifecycleTest;

TEST_F(TemplateCatalogueTest, ATenantsOwnTemplateHidesTheBuiltInOneForItAlone) {
  std::string own = templates::tenantTemplateName("t1", "minimal");
  installTemplate(own);
  TemplateCatalogue cat(*templates_);
  EXPECT_EQ(*cat.resolve("t1", "minimal"), own);
  EXPECT_EQ(*cat.resolve("t2", "minimal"), "minimal");
  auto opened = cat.open("t1", "minimal");
  ASSERT_TRUE(opened.ok()) << opened.error().message();
  EXPECT_EQ(opened->stored, own);
  EXPECT_EQ(opened->tmpl->manifest.name, own);
  // The lifecycle creates from the same answer, and shows the tenant's name.
  std::string id = created();
  EXPECT_EQ(lc_->get("t1", id)->template_name, "minimal");
  EXPECT_EQ(*lc_->templateCatalogue().resolve("t1", "minimal"), own);
  EXPECT_EQ(*lc_->templateCatalogue().resolve("t2", "minimal"), "minimal");
}

TEST_F(TemplateCatalogueTest, NamesNoTemplateMayHaveAndMissingOnesAreRefused) {
  TemplateCatalogue cat(*templates_);
  EXPECT_EQ(cat.resolve("t1", "a b").error().code(), Code::kInvalidArgument);
  EXPECT_EQ(cat.resolve("t1", std::string(65, 'a')).error().code(), Code::kInvalidArgument);
  // Another tenant's stored name is no name at all, even once installed.
  std::string theirs = templates::tenantTemplateName("t2", "py");
  installTemplate(theirs);
  auto stored = cat.resolve("t1", theirs);
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().code(), Code::kNotFound);
  EXPECT_THAT(stored.error().message(), HasSubstr("does not exist"));
  // A plain name resolves; opening it says what is missing, in the
  // caller's words.
  EXPECT_EQ(*cat.resolve("t1", "nope"), "nope");
  auto missing = cat.open("t1", "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kNotFound);
  EXPECT_EQ(missing.error().message(), "template 'nope' does not exist");
  EXPECT_EQ(cat.open("t1", "nope", "base template").error().message(),
            "base template 'nope' does not exist");
  CreateRequest c;
  c.tenant = "t1";
  c.template_name = "nope";
  EXPECT_EQ(lc_->create(c).error().code(), Code::kNotFound);
}

TEST_F(TemplateCatalogueTest, ANewTemplateNameIsNeitherReservedNorBuiltIn) {
  TemplateCatalogue cat(*templates_);
  auto reserved = cat.checkNewName(templates::tenantTemplateName("t1", "py"));
  ASSERT_FALSE(reserved.ok());
  EXPECT_EQ(reserved.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(reserved.error().message(), HasSubstr("reserved"));
  auto builtin = cat.checkNewName("minimal");
  ASSERT_FALSE(builtin.ok());
  EXPECT_EQ(builtin.error().code(), Code::kAlreadyExists);
  EXPECT_TRUE(cat.checkNewName("py").ok());
  EXPECT_EQ(TemplateCatalogue::storedName("t1", "py"), templates::tenantTemplateName("t1", "py"));
  // A build is refused with the same answer before anything is accepted.
  templates::BuildSpec spec;
  spec.name = "minimal";
  EXPECT_EQ(lc_->buildTemplate("t1", spec).error().code(), Code::kAlreadyExists);
  EXPECT_EQ(node_->count("build"), 0);
}

TEST_F(TemplateCatalogueTest, ATenantsDiskCountsOnlyItsOwnTemplates) {
  TemplateCatalogue cat(*templates_);
  EXPECT_EQ(cat.tenantDiskMib("t1"), 0u);
  std::string stored = templates::tenantTemplateName("t1", "mine");
  installTemplate(stored);
  {
    auto t = templates_->open(stored);
    ASSERT_TRUE(t.ok()) << t.error().message();
    std::ofstream(t->get()->path(templates::kMemoryFile)) << std::string(8 << 20, 'm');
  }
  EXPECT_GE(cat.tenantDiskMib("t1"), 8u);
  EXPECT_EQ(cat.tenantDiskMib("t2"), 0u);
  EXPECT_EQ(cat.tenantDiskMib("t1"), templates_->allocatedMib(stored));
}

// A tenant deletes its own template, every version; a version its
// sandboxes hold is retired (they run on), and no new sandbox starts from
// it. Built-in and other tenants' templates are not its to delete.
TEST_F(TemplateCatalogueTest, ATenantDeletesItsOwnTemplateAndItsSandboxesRunOn) {
  std::string own = templates::tenantTemplateName("t1", "py");
  installTemplate(own);
  CreateRequest c;
  c.template_name = "py";
  std::string id = created(c);
  templates_->acquire(own + "@v1");  // as the node holds it for the sandbox
  EXPECT_EQ(lc_->deleteTemplate("t2", "py").error().code(), Code::kNotFound);
  EXPECT_EQ(lc_->deleteTemplate("t1", "minimal").error().code(), Code::kPermissionDenied);
  ASSERT_TRUE(lc_->deleteTemplate("t1", "py").ok());
  EXPECT_TRUE(templates_->retired(own, "v1"));
  EXPECT_EQ(lc_->get("t1", id)->state, store::SandboxState::kRunning);
  c.tenant = "t1";
  auto again = lc_->create(c);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Code::kNotFound);
  EXPECT_EQ(lc_->deleteTemplate("t1", "py").error().code(), Code::kNotFound) << "deleted already";
  templates_->release(own + "@v1");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/templates/" + own + "/v1"));
}

}  // namespace
}  // namespace vessel::ops
