#include "templates/dockerfile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vessel::templates {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string why(std::string_view text, const std::map<std::string, std::string>& args = {}) {
  auto p = parseDockerfile(text, args);
  return p.ok() ? "parsed" : p.error().message();
}

TEST(DockerfileTest, ReadsEveryInstructionItSupports) {
  auto p = parseDockerfile(R"(# syntax=docker/dockerfile:1
# a comment
ARG TAG=1
FROM 127.0.0.1:5000/test/app:${TAG} AS build
ARG GREETING=hi
ENV APP_HOME=/srv/app LANG="C.UTF-8"
ENV OLD  the old   form
WORKDIR $APP_HOME
RUN echo "$GREETING" > greeting && \
    echo done
RUN ["/bin/echo", "exec form"]
COPY --chown=1000:1000 --chmod=0755 run.sh *.py ./bin/
ADD data.tar.gz /opt/
USER 1000
WORKDIR sub
EXPOSE 8080 53/udp 9000/tcp
LABEL a=b
ENTRYPOINT ["python3", "-m"]
CMD ["http.server", "8080"]
)");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->from_image, "127.0.0.1:5000/test/app:1");
  EXPECT_TRUE(p->from_template.empty());
  ASSERT_EQ(p->steps.size(), 4u);
  const auto& run = p->steps[0];
  EXPECT_EQ(run.line, 9u);
  ASSERT_TRUE(run.run);
  EXPECT_THAT(run.run->argv,
              ElementsAre("/bin/sh", "-c", "echo \"$GREETING\" > greeting &&     echo done"));
  EXPECT_EQ(run.workdir, "/srv/app");
  EXPECT_EQ(run.user, "root");
  EXPECT_THAT(run.env, ElementsAre("GREETING=hi", "APP_HOME=/srv/app", "LANG=C.UTF-8",
                                   "OLD=the old   form"));
  EXPECT_THAT(p->steps[1].run->argv, ElementsAre("/bin/echo", "exec form"));
  EXPECT_EQ(p->steps[1].line, 11u);
  const auto& copy = *p->steps[2].copy;
  EXPECT_FALSE(copy.add);
  EXPECT_THAT(copy.sources, ElementsAre("run.sh", "*.py"));
  EXPECT_EQ(copy.dest, "/srv/app/bin/");
  EXPECT_EQ(copy.chown, "1000:1000");
  EXPECT_EQ(copy.chmod, 0755u);
  EXPECT_TRUE(p->steps[3].copy->add);
  EXPECT_EQ(p->steps[3].copy->dest, "/opt/");
  EXPECT_EQ(p->user, "1000");
  EXPECT_EQ(p->workdir, "/srv/app/sub");
  EXPECT_THAT(p->exposed, ElementsAre(8080, 9000));
  EXPECT_THAT(p->start, ElementsAre("python3", "-m", "http.server", "8080"));
  EXPECT_THAT(p->env, ElementsAre("APP_HOME=/srv/app", "LANG=C.UTF-8", "OLD=the old   form"))
      << "ARGs are not the template's defaults";
  EXPECT_THAT(p->warnings, ElementsAre(HasSubstr("LABEL")));
}

TEST(DockerfileTest, BuildArgsOverrideDefaultsAndGlobalArgsNeedRedeclaring) {
  auto p = parseDockerfile(R"(ARG BASE=minimal
ARG V=1
FROM vessel://$BASE
ARG V
ARG W=${V:-none}-${UNSET:-dflt}-${V:+set}
RUN true
)",
                           {{"V", "7"}, {"NEVER", "x"}});
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->from_template, "minimal");
  EXPECT_THAT(p->steps[0].env, ElementsAre("V=7", "W=7-dflt-set"));
  EXPECT_THAT(p->warnings, ElementsAre(HasSubstr("NEVER")));
  // Without the build arg the re-declared ARG takes the global default.
  auto q = parseDockerfile("ARG V=1\nFROM vessel://minimal\nARG V\nRUN true\n");
  ASSERT_TRUE(q.ok());
  EXPECT_THAT(q->steps[0].env, ElementsAre("V=1"));
  // A global ARG not re-declared is not in the stage.
  auto r = parseDockerfile("ARG V=1\nFROM vessel://minimal\nRUN true\n");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->steps[0].env.empty());
}

TEST(DockerfileTest, ShellFormsUseShellAndEntrypointShellFormDropsCmd) {
  auto p = parseDockerfile(R"(FROM vessel://minimal
SHELL ["/bin/bash", "-eu", "-c"]
RUN echo $HOME
CMD ["ignored"]
ENTRYPOINT exec server --port 1
)");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_THAT(p->steps[0].run->argv, ElementsAre("/bin/bash", "-eu", "-c", "echo $HOME"))
      << "RUN is not expanded by Vessel: its shell does that";
  EXPECT_THAT(p->start, ElementsAre("/bin/bash", "-eu", "-c", "exec server --port 1"));
  auto c = parseDockerfile("FROM vessel://minimal\nCMD sleep 1\n");
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(c->start, ElementsAre("/bin/sh", "-c", "sleep 1"));
  // Not valid JSON: the shell form, as docker reads it.
  auto j = parseDockerfile("FROM vessel://minimal\nRUN [ -d /tmp ]\n");
  ASSERT_TRUE(j.ok());
  EXPECT_THAT(j->steps[0].run->argv, ElementsAre("/bin/sh", "-c", "[ -d /tmp ]"));
}

TEST(DockerfileTest, EscapeDirectiveContinuationsAndCommentsInsideThem) {
  auto p = parseDockerfile(
      "# escape=`\n\nFROM vessel://minimal\nRUN echo a `\n# inside\n\n  b\n"
      "COPY a`$b /x\n");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_THAT(p->steps[0].run->argv, ElementsAre("/bin/sh", "-c", "echo a   b"));
  EXPECT_EQ(p->steps[0].line, 4u);
  EXPECT_THAT(p->steps[1].copy->sources, ElementsAre("a$b"));
  EXPECT_EQ(p->steps[1].line, 8u);
  // A directive after the first line is a comment.
  auto q = parseDockerfile("FROM vessel://minimal\n# escape=`\nRUN echo a \\\n b\n");
  ASSERT_TRUE(q.ok());
  EXPECT_THAT(q->steps[0].run->argv, ElementsAre("/bin/sh", "-c", "echo a  b"));
  EXPECT_THAT(why("# escape=x\nFROM vessel://minimal\n"), HasSubstr("escape"));
}

TEST(DockerfileTest, QuotesAndEscapesInExpandedWords) {
  auto p = parseDockerfile(R"(FROM vessel://minimal
ENV A=one
ENV B='$A' C="$A two" D=\$A E="a\"b"
COPY "file with space" 'x y' /dst/
)");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_THAT(p->env, ElementsAre("A=one", "B=$A", "C=one two", "D=$A", "E=a\"b"));
  EXPECT_THAT(p->steps[0].copy->sources, ElementsAre("file with space", "x y"));
  EXPECT_THAT(why("FROM vessel://minimal\nENV A=\"open\n"), HasSubstr("line 2: a quote"));
}

TEST(DockerfileTest, RefusesWhatVesselDoesNotDoNamingTheLine) {
  const std::string from = "FROM vessel://minimal\n";
  EXPECT_THAT(why(from + "FROM vessel://debian\n"), HasSubstr("line 2: multi-stage"));
  EXPECT_THAT(why(from + "COPY --from=build /a /b\n"), HasSubstr("line 2: COPY --from"));
  EXPECT_THAT(why(from + "RUN --mount=type=cache,target=/x true\n"),
              HasSubstr("line 2: RUN --mount"));
  EXPECT_THAT(why(from + "HEALTHCHECK CMD true\n"), HasSubstr("line 2: HEALTHCHECK"));
  EXPECT_THAT(why(from + "ONBUILD RUN true\n"), HasSubstr("line 2: ONBUILD"));
  EXPECT_THAT(why(from + "VOLUME /data\n"), HasSubstr("line 2: VOLUME"));
  EXPECT_THAT(why(from + "STOPSIGNAL 9\n"), HasSubstr("line 2"));
  EXPECT_THAT(why(from + "FROBNICATE x\n"), HasSubstr("line 2: unknown instruction 'FROBNICATE'"));
  EXPECT_THAT(why(from + "ADD https://example.com/x /x\n"), HasSubstr("line 2: ADD from a URL"));
  EXPECT_THAT(why(from + "RUN cat <<EOF > /x\n"), HasSubstr("line 2: RUN with a heredoc"));
  EXPECT_THAT(why(from + "COPY onlyone\n"), HasSubstr("source and a destination"));
  EXPECT_THAT(why(from + "COPY --chmod=999 a b\n"), HasSubstr("--chmod"));
  EXPECT_THAT(why(from + "COPY --chown=a;b a b\n"), HasSubstr("--chown"));
  EXPECT_THAT(why(from + "EXPOSE 70000\n"), HasSubstr("EXPOSE"));
  EXPECT_THAT(why(from + "ENV 1A=x\n"), HasSubstr("bad name"));
  EXPECT_THAT(why(from + "ENV A=${B?no}\n"), HasSubstr("unsupported expansion"));
  EXPECT_THAT(why(from + "SHELL /bin/bash\n"), HasSubstr("SHELL takes a JSON list"));
  EXPECT_THAT(why(from + "RUN []\n"), HasSubstr("line 2: RUN's exec form needs a program"));
  EXPECT_THAT(why(from + "RUN [\"\", \"x\"]\n"), HasSubstr("needs a program"));
  EXPECT_THAT(why(from + "RUN [\"a\\u0000b\"]\n"), HasSubstr("holds a NUL"));
  EXPECT_THAT(why(from + "SHELL [\"/bin/sh\\u0000\"]\n"), HasSubstr("SHELL takes"));
  // CMD [] and ENTRYPOINT [] clear them, as in docker.
  auto cleared = parseDockerfile(from + "CMD [\"a\"]\nCMD []\n");
  ASSERT_TRUE(cleared.ok()) << cleared.error().message();
  EXPECT_TRUE(cleared->start.empty());
  EXPECT_THAT(why(from + "USER \"\"\n"), HasSubstr("USER"));
  EXPECT_THAT(why("RUN true\n"), HasSubstr("line 1: FROM must come first"));
  EXPECT_THAT(why("ARG A=1\n"), HasSubstr("no FROM"));
  EXPECT_THAT(why("FROM scratch\n"), HasSubstr("scratch"));
  EXPECT_THAT(why("FROM --platform=linux/arm64 alpine\n"), HasSubstr("linux/amd64 only"));
  EXPECT_THAT(why("FROM Not:A:Ref\n"), HasSubstr("line 1"));
  EXPECT_THAT(why("FROM vessel://no/slash\n"), HasSubstr("vessel://NAME"));
  EXPECT_THAT(why(from + "RUN a" + '\0' + "b\n"), HasSubstr("NUL"));
  EXPECT_THAT(why(from, {{"BAD-NAME", "x"}}), HasSubstr("--build-arg"));
}

TEST(DockerfileTest, ExpansionsThatDoubleAreBounded) {
  std::string text = "FROM vessel://minimal\nENV A=xxxxxxxxxxxxxxxx\n";
  for (int i = 0; i < 20; ++i) text += "ENV A=$A$A\n";
  EXPECT_THAT(why(text), HasSubstr("KiB"));
  std::string deep = "FROM vessel://minimal\nENV A=";
  for (int i = 0; i < 40; ++i) deep += "${X:-";
  for (int i = 0; i < 40; ++i) deep += "}";
  EXPECT_THAT(why(deep + "\n"), HasSubstr("nest"));
}

TEST(DockerfileTest, DestinationsFollowWorkdir) {
  auto p = parseDockerfile(R"(FROM vessel://minimal
COPY a .
WORKDIR /w
COPY a .
COPY a b
COPY a ../up/
COPY a /abs
)");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->steps[0].copy->dest, "/");
  EXPECT_EQ(p->steps[1].copy->dest, "/w/");
  EXPECT_EQ(p->steps[2].copy->dest, "/w/b");
  EXPECT_EQ(p->steps[3].copy->dest, "/up/");
  EXPECT_EQ(p->steps[4].copy->dest, "/abs");
}

}  // namespace
}  // namespace vessel::templates
